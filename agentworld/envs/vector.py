"""TextVectorEnv: several text environments of one domain behind Gymnasium's vector interface.

`step(actions)` takes one action per sub-environment and returns a tuple of observations and
arrays of rewards, terminations and truncations, as `gymnasium.vector.VectorEnv` does. How the
sub-environments step is their class's `step_batch`: a WorldModelEnv answers all of them with one
batched generation, a real environment steps one after the other.

Step limits are Gymnasium's: each sub-env's `max_episode_steps` comes from its `TimeLimit`
wrapper (what `gymnasium.make("agentworld/<name>-v1")` returns), else from its spec (the domain's
registered limit), and the vector's own `max_episode_steps` argument overrides both, as
`gymnasium.make(..., max_episode_steps=N)` does. Batched stepping goes around per-env wrappers, so
the vector unwraps the `TimeLimit` and counts each sub-env's steps itself, with `TimeLimit`'s rule:
the step that reaches the limit comes back truncated (its info says `max_steps_reached` unless the
episode also terminated there).

Episodes of different lengths run side by side, so autoreset is disabled: a finished
sub-environment is not stepped again (its action is ignored; it repeats its last observation
with reward 0 and its final flags) until `reset` restarts it (`options={"reset_mask": mask}`
restarts only the masked ones). Each sub-environment's info dict comes back whole under
`infos["step_info"]` (an object array, masked by `infos["_step_info"]`): Gymnasium's per-key
arrays would cast heterogeneous values, e.g. an exit code that is None in one env and an int in
the next cannot share an int array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

from agentworld.envs.base import StepResult, TextEnv


def time_limited(env: gymnasium.Env) -> tuple[TextEnv, int | None]:
    """The TextEnv inside `env` and its step limit (its `TimeLimit`'s, else its spec's)."""
    limit = None
    while isinstance(env, gymnasium.Wrapper):
        if isinstance(env, TimeLimit):
            limit = env._max_episode_steps if limit is None else limit  # the outermost one wins
        elif not isinstance(env, (OrderEnforcing, PassiveEnvChecker)):
            raise TypeError(f"{type(env).__name__}: a TextVectorEnv steps its sub-envs in batches, around their "
                            "wrappers; only TimeLimit is applied (the vector counts the steps itself)")
        env = env.env
    if limit is None and env.spec is not None:
        limit = env.spec.max_episode_steps
    return env, limit  # type: ignore[return-value]


class TextVectorEnv(VectorEnv):
    """`envs` stepped together; `close()` closes them all.

    `max_episode_steps`: one step limit for every sub-env, or one per sub-env (None: each env's
    own `TimeLimit` or registered limit)."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self, envs: Sequence[gymnasium.Env],
                 max_episode_steps: int | Sequence[int | None] | None = None) -> None:
        if not envs:
            raise ValueError("TextVectorEnv needs at least one environment")
        envs, limits = zip(*(time_limited(env) for env in envs))
        if isinstance(max_episode_steps, int):
            limits = (max_episode_steps,) * len(envs)
        elif max_episode_steps is not None:
            if len(max_episode_steps) != len(envs):
                raise ValueError(f"max_episode_steps: {len(max_episode_steps)} limits for {len(envs)} sub-envs")
            limits = tuple(given if given is not None else own for given, own in zip(max_episode_steps, limits))
        if any(limit is not None and limit < 1 for limit in limits):
            raise ValueError(f"max_episode_steps must be at least 1, got {limits}")
        #: Each sub-env's step limit (None: none; `run_episodes` requires one).
        self.max_episode_steps: tuple[int | None, ...] = tuple(limits)
        domains = {env.domain for env in envs}
        if len(domains) != 1:
            raise ValueError(f"TextVectorEnv: one domain per vector, got {sorted(domains)}")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._step_batch = type(self.envs[0]).step_batch
        self._observations = [""] * self.num_envs
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)
        self._running = np.zeros(self.num_envs, dtype=bool)
        self._elapsed = np.zeros(self.num_envs, dtype=np.int64)

    @property
    def running(self) -> np.ndarray:
        """Which sub-environments are in an episode (reset and not finished)."""
        return self._running.copy()

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Reset every sub-environment, or those of `options["reset_mask"]`.

        `seed`: one int (sub-env i gets seed + i, as Gymnasium's vector envs do) or one seed per
        sub-env. `options["env_options"]`: one options dict per sub-env (e.g. a task template
        each); any other options go to every sub-env."""
        options = dict(options or {})
        mask = np.asarray(options.pop("reset_mask", np.ones(self.num_envs, dtype=bool)), dtype=bool)
        per_env = options.pop("env_options", None) or [None] * self.num_envs
        seeds = ([seed + i for i in range(self.num_envs)] if isinstance(seed, int)
                 else list(seed) if seed is not None else [None] * self.num_envs)
        if len(seeds) != self.num_envs or len(per_env) != self.num_envs or len(mask) != self.num_envs:
            raise ValueError(f"reset: give one seed, one options dict and one mask entry per sub-env ({self.num_envs})")
        infos = self._empty_infos()
        for i in np.flatnonzero(mask):
            env_options = {**options, **(per_env[i] or {})} or None
            self._observations[i], info = self.envs[i].reset(seed=seeds[i], options=env_options)
            self._terminated[i] = self._truncated[i] = False
            self._running[i], self._elapsed[i] = True, 0
            infos["step_info"][i], infos["_step_info"][i] = info, True
        return tuple(self._observations), infos

    def step(self, actions: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray,
                                                    dict[str, Any]]:
        """Step the running sub-environments with their actions (finished ones are held)."""
        if len(actions) != self.num_envs:
            raise ValueError(f"step: {len(actions)} actions for {self.num_envs} sub-envs")
        active = [int(i) for i in np.flatnonzero(self._running)]
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        infos = self._empty_infos()
        results = self._step_batch([self.envs[i] for i in active], [actions[i] for i in active]) if active else []
        for i, (observation, reward, terminated, truncated, info) in zip(active, results):
            self._elapsed[i] += 1
            limit = self.max_episode_steps[i]
            if limit is not None and self._elapsed[i] >= limit:  # gymnasium.wrappers.TimeLimit's rule
                truncated = True
                info = {**info, "max_steps_reached": not terminated}
            self._observations[i], rewards[i] = observation, reward
            self._terminated[i], self._truncated[i] = terminated, truncated
            self._running[i] = not (terminated or truncated)
            infos["step_info"][i], infos["_step_info"][i] = info, True
        return tuple(self._observations), rewards, self._terminated.copy(), self._truncated.copy(), infos

    def _empty_infos(self) -> dict[str, Any]:
        return {"step_info": np.full(self.num_envs, None, dtype=object),
                "_step_info": np.zeros(self.num_envs, dtype=bool)}

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def step_result(observations: Sequence[str], rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                infos: dict[str, Any], index: int) -> StepResult:
    """Sub-env `index`'s part of a vector step, in the single env's types (plain Python values)."""
    return (observations[index], float(rewards[index]), bool(terminated[index]), bool(truncated[index]),
            infos["step_info"][index] if infos["_step_info"][index] else {})
