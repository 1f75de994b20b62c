"""The episode engine: behaviour policies play envs in lockstep, one Transition row per step.

Real collection (one env at a time) and synthesis (a batch of WorldModelEnvs whose steps one
batched generation answers) both run their episodes here, and `transition` is the one place a
step becomes a row, so real and synthetic rows carry the same fields.

Everything is derived from (seed, episode index): the episode seed picks the task and its
files, a separate stream picks the behaviour policy by the policy_mix shares and drives the
policy. So any subset of episodes can be played independently, in any order or in parallel
shards, and yields the same tasks and actions every time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from agentworld.config import PolicyMix
from agentworld.data.schema import Transition, transition_id, utc_now
from agentworld.domains import make_policy
from agentworld.envs.base import Task, TextEnv
from agentworld.envs.behaviour import POLICY_NAMES

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
#: Steps several envs at once: (envs, one action each) -> one step result each.
StepMany = Callable[[Sequence[TextEnv], Sequence[str]], list[StepResult]]

SEED_STRIDE = 1_000_003  # a prime: seeds of different base seeds never collide in practice


def episode_seed(base_seed: int, index: int) -> int:
    return base_seed * SEED_STRIDE + index


def trajectory_id_for(prefix: str, base_seed: int, index: int) -> str:
    return f"{prefix}-s{base_seed}-e{index:06d}"


def choose_policy(mix: PolicyMix, rng: random.Random) -> str:
    """Draw a policy name with probability equal to its share in the mix."""
    roll, acc = rng.random(), 0.0
    for name in POLICY_NAMES:
        acc += getattr(mix, name)
        if roll < acc:
            return name
    return max(POLICY_NAMES, key=lambda n: getattr(mix, n))  # float round-off at the top end


def step_each(envs: Sequence[TextEnv], actions: Sequence[str]) -> list[StepResult]:
    """Envs that cannot batch: one `step` each."""
    return [env.step(action) for env, action in zip(envs, actions)]


def transition(env: TextEnv, task: Task, trajectory_id: str, turn: int, action: str, result: StepResult, *,
               last: bool, policy: str, seed: int, info: Mapping[str, Any]) -> Transition:
    """One step as a row. `info` is the step's info plus what the caller adds (episode index,
    the simulating model); whether the episode ended by itself or at the step limit is recorded
    here for every source."""
    observation, reward, terminated, truncated, step_info = result
    return Transition(
        id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn, domain=env.domain,
        env_id=env.env_id, task_id=task.task_id, instruction=task.instruction, action=action,
        observation=observation, reward=float(reward), done=last,
        source="synthetic" if step_info.get("simulated") else "real", policy=policy,
        env_version=env.env_version, seed=seed, timestamp=utc_now(),
        info={**info, "terminated": terminated, "max_steps_reached": last and not (terminated or truncated)},
    )


def play_episodes(envs: Sequence[TextEnv], indices: Sequence[int], *, base_seed: int, policy_mix: PolicyMix,
                  max_steps: int, trajectory_prefix: str, step: StepMany = step_each,
                  extra_info: Mapping[str, Any] | None = None, drop_info: Sequence[str] = ()) -> Iterator[Transition]:
    """Play episode `indices[k]` on `envs[k]`, all together, yielding each step's row as it completes.

    `step` answers the active envs' actions at once (`step_each`, or `step_many` for simulated
    envs sharing one backend); `drop_info` leaves bulky step info out of the rows."""
    if len(envs) != len(indices):
        raise ValueError(f"{len(envs)} envs but {len(indices)} episodes")
    seeds = [episode_seed(base_seed, i) for i in indices]
    rngs = [random.Random(f"policy:{seed}") for seed in seeds]
    names = [choose_policy(policy_mix, rng) for rng in rngs]
    observations, tasks = [], []
    for env, seed in zip(envs, seeds):
        observations.append(env.reset(seed=seed)[0])
        if env.task is None:
            raise TypeError(f"{type(env).__name__} exposes no `task` after reset(); policies need it")
        tasks.append(env.task)
    policies = [make_policy(env.domain, name, task) for env, name, task in zip(envs, names, tasks)]
    trajectory_ids = [trajectory_id_for(trajectory_prefix, base_seed, i) for i in indices]
    histories: list[list[tuple[str, str]]] = [[] for _ in envs]
    active = list(range(len(envs)))
    for turn in range(max_steps):
        if not active:
            return
        actions = [policies[k].act(observations[k], histories[k], rngs[k]) for k in active]
        still = []
        for k, action, result in zip(active, actions, step([envs[k] for k in active], actions)):
            _, _, terminated, truncated, step_info = result
            last = terminated or truncated or turn == max_steps - 1
            info = {**{key: v for key, v in step_info.items() if key not in drop_info}, **(extra_info or {}),
                    "episode_index": indices[k]}
            yield transition(envs[k], tasks[k], trajectory_ids[k], turn, action, result, last=last,
                             policy=names[k], seed=seeds[k], info=info)
            observations[k] = result[0]
            histories[k].append((action, result[0]))
            if not last:
                still.append(k)
        active = still
