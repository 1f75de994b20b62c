"""WorldModelEnv: the real domains' text-env protocol, answered by a world model.

An agent written against `TextEnv` (`reset` -> observation, `step(action)` -> observation,
reward, terminated, truncated, info) runs unchanged against a real environment or this one.
The episode's task and first observation come from a `TaskSource` (by default the real
domain's own task generator, so simulated and real episodes start alike); every `step` asks
the world model for the next observation given the task, the opening state (what the task
source's reset showed), the history and the action, with the run's `Control` instructions in
the system prompt.

Reward and termination come from an injected `Verifier` (agentworld/simulation/verifiers.py),
as a real environment's come from its checker: reward 1.0 and `terminated` at the step the
verifier first says solved (`info["solved"]`). Without one, the reward is 0 and only the
domain's end action ends an episode. The step limit is Gymnasium's `TimeLimit` (or the
`TextVectorEnv`'s `max_episode_steps`), outside the env.

A generation without the observation marker is retried by sampling (`retries` times at
`retry_temperature`); if it is still malformed, the episode goes on with a marked error
observation (`info["wm_error"]`) instead of crashing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentworld.data.prompts import WorldModelExample, parse_observation, system_prompt
from agentworld.domains import get_domain
from agentworld.envs.base import StepResult, Task, TextEnv
from agentworld.models.backends import Backend
from agentworld.simulation.verifiers import Verifier

ERROR_OBSERVATION = "[world model error: no well-formed observation after {attempts} attempts]"


class TaskSource(Protocol):
    """Where simulated episodes start: a task and the first observation for a seed."""

    def start(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Task, str, dict[str, Any]]: ...


class RealTaskSource:
    """Tasks and first observations from the real domain's `reset` (its task generator and set-up);
    no agent action ever reaches the real environment. One real env is kept and reset per
    episode (start-up is paid once); share a source between envs of one domain and `close` it."""

    def __init__(self, domain: str, make_env: Callable[[], TextEnv] | None = None) -> None:
        from agentworld.domains import make_env as registry_env

        self.domain = domain
        self._make_env = make_env or (lambda: registry_env(domain))
        self._env: TextEnv | None = None

    def start(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Task, str, dict[str, Any]]:
        if self._env is None:
            self._env = self._make_env()
        observation, info = self._env.reset(seed=seed, options=options)
        if self._env.task is None:
            raise TypeError(f"{type(self._env).__name__} set no `task` in reset()")
        return self._env.task, observation, info

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


@dataclass(frozen=True)
class Control:
    """Instructions that steer the simulator beyond imitation, recorded on every synthetic row.

    `faults` (e.g. "tool errors", "timeouts", "rate limits", "permission denied", "flaky tests")
    are injected at `fault_rate`; `perturbation` changes the initial state; `fiction` describes a
    self-consistent invented world (e.g. an MCP database's invented records).
    """

    faults: tuple[str, ...] = ()
    fault_rate: float = 0.0
    perturbation: str | None = None
    fiction: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def system_suffix(self) -> str:
        lines = []
        if self.fiction:
            lines.append(f"Simulate this invented world consistently: {self.fiction}")
        if self.perturbation:
            lines.append(f"The environment's state differs from usual: {self.perturbation}")
        if self.faults and self.fault_rate > 0:
            lines.append(f"Inject faults ({', '.join(self.faults)}) in about {self.fault_rate:.0%} of the steps, "
                         "as the real environment would report them.")
        return ("\n\nSimulation control:\n" + "\n".join(f"- {line}" for line in lines)) if lines else ""

    def as_record(self) -> dict[str, Any]:
        return {"faults": list(self.faults), "fault_rate": self.fault_rate, "perturbation": self.perturbation,
                "fiction": self.fiction, **self.notes}


class WorldModelEnv(TextEnv):
    """A domain simulated by a world model behind any `Backend`."""

    env_version = "wm1"

    def __init__(self, domain: str, backend: Backend, tasks: TaskSource | None = None, *,
                 control: Control | None = None, retries: int = 2, retry_temperature: float = 0.8,
                 verifier: Verifier | None = None, system: str | None = None) -> None:
        """`system`: a fixed system prompt (a recorded episode's own, for rollouts) instead of the
        domain's world-model prompt for each task. Step limits are Gymnasium's: wrap it in
        `gymnasium.wrappers.TimeLimit`, or give the `TextVectorEnv` of them `max_episode_steps`."""
        super().__init__()
        self.domain, self.backend, self.verifier = domain, backend, verifier
        self._owns_tasks = tasks is None
        self.tasks = tasks or RealTaskSource(domain)
        self.control = control or Control()
        self.retries, self.retry_temperature = retries, retry_temperature
        self.history: list[tuple[str, str]] = []
        self.fixed_system = system
        self._system = ""
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.task, observation, info = self.tasks.start(seed, options)
        self._system = (self.fixed_system if self.fixed_system is not None
                        else system_prompt(self.domain, self.task.instruction, observation)) + self.control.system_suffix()
        self.history, self._done = [], False
        return observation, {**info, "simulated": True, "control": self.control.as_record()}

    def example(self, action: str) -> WorldModelExample:
        """The world-model prompt for `action` in the current episode."""
        return WorldModelExample(id=f"{self.task.task_id if self.task else 'none'}:{len(self.history):03d}",
                                 domain=self.domain, system=self._system, history=list(self.history), action=action)

    def step(self, action: str) -> StepResult:
        return step_many([self], [action])[0]

    @classmethod
    def step_batch(cls, envs: Sequence[TextEnv], actions: Sequence[str]) -> list[StepResult]:
        """All envs' steps from one batched generation (they share one backend)."""
        return step_many(envs, actions)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the task source if this env made it (a shared one is closed by its owner)."""
        if self._owns_tasks and hasattr(self.tasks, "close"):
            self.tasks.close()
        self._done = True

    def ends_episode(self, action: str) -> bool:
        return action.strip() in get_domain(self.domain).end_actions

    def check_running(self) -> None:
        if self._done or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")

    def record(self, action: str, generation: str | None, attempts: int) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Close one step: the parsed observation (or the marked error) goes into the history."""
        if generation is None:
            return self._finish(action, "", {"ended_by_agent": True, "attempts": 0, "wm_error": False})
        observation, well_formed = parse_observation(generation)
        if not well_formed:
            observation = ERROR_OBSERVATION.format(attempts=attempts)
        self.history.append((action, observation))
        info = {"attempts": attempts, "wm_error": not well_formed, "generation": generation}
        return observation, 0.0, False, False, {**info, **self._tags()}

    def _finish(self, action: str, observation: str, info: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.history.append((action, observation))
        self._done = True
        return observation, 0.0, True, False, {**info, **self._tags()}

    def _tags(self) -> dict[str, Any]:
        """What every simulated step carries: that it is simulated, and under which controls."""
        return {"simulated": True, "control": self.control.as_record()}


def step_many(envs: Sequence[WorldModelEnv], actions: Sequence[str]) -> list[StepResult]:
    """Step many simulated episodes with one batched generation per attempt.

    Each env must share its backend with the others (the batch goes to `envs[0].backend`).
    Malformed generations are retried together, sampled at each env's `retry_temperature`.
    Then each env's verifier judges the envs it must judge now (batched per verifier).
    """
    if len(envs) != len(actions):
        raise ValueError(f"{len(envs)} envs but {len(actions)} actions")
    for env in envs:
        env.check_running()
    generations: list[str | None] = [None] * len(envs)
    attempts = [0] * len(envs)
    pending = [i for i, (env, action) in enumerate(zip(envs, actions)) if not env.ends_episode(action)]
    examples = {i: envs[i].example(actions[i]) for i in pending}
    backend = envs[0].backend
    for attempt in range(max(env.retries for env in envs) + 1):
        todo = [i for i in pending if attempt <= envs[i].retries]
        if not todo:
            break
        temperature = 0.0 if attempt == 0 else envs[todo[0]].retry_temperature
        for i, generation in zip(todo, backend.generate([examples[i] for i in todo], temperature=temperature)):
            generations[i], attempts[i] = generation, attempt + 1
        pending = [i for i in todo if not parse_observation(generations[i] or "")[1]]
    results = [env.record(action, generations[i], attempts[i]) for i, (env, action) in enumerate(zip(envs, actions))]
    return verify(envs, results)


def verify(envs: Sequence[WorldModelEnv], results: list[StepResult]) -> list[StepResult]:
    """Reward and termination from each env's verifier, as a real env's checker gives them: the
    verifier is asked after every step; solved means reward 1.0, `terminated` and `info["solved"]`."""
    asked: dict[int, tuple[Verifier, list[int]]] = {}
    for i, env in enumerate(envs):
        if env.verifier is not None:
            asked.setdefault(id(env.verifier), (env.verifier, []))[1].append(i)
    out = list(results)
    for verifier, indices in asked.values():
        for i, solved in zip(indices, verifier.verdicts([envs[i] for i in indices])):
            observation, _, terminated, truncated, info = out[i]
            if solved:
                envs[i]._done = True
            out[i] = (observation, float(solved), terminated or solved, truncated, {**info, "solved": solved})
    return out
