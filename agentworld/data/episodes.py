"""Behaviour policies play a TextVectorEnv's episodes through the episode loop
(agentworld/envs/engine.py), one Transition row per step.

Real collection (a vector of one real env) and synthesis (a vector of WorldModelEnvs whose steps
one batched generation answers) both run their episodes here, and `transition` is the one place
a step becomes a row, so real and synthetic rows carry the same fields.

Everything is derived from (seed, episode index): the episode seed picks the task and its
files, a separate stream picks the behaviour policy by the policy_mix shares and drives the
policy. So any subset of episodes can be played independently, in any order or in parallel
shards, and yields the same tasks and actions every time.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agentworld.config import PolicyMix
from agentworld.data.schema import FIRST_OBSERVATION, Transition, transition_id, utc_now
from agentworld.domains import make_policy
from agentworld.envs.base import StepResult, Task, TextEnv
from agentworld.envs.behaviour import POLICY_NAMES, Policy
from agentworld.envs.engine import run_episodes
from agentworld.envs.vector import TextVectorEnv

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


def transition(env: TextEnv, task: Task, trajectory_id: str, turn: int, action: str, result: StepResult, *,
               last: bool, policy: str, seed: int, info: Mapping[str, Any]) -> Transition:
    """One step as a row. `info` is the step's info plus what the caller adds (episode index,
    the simulating model); whether the episode ended by itself or at the step limit (the vector's
    `TimeLimit` rule marks that step) is recorded here for every source."""
    observation, reward, terminated, truncated, step_info = result
    try:
        return Transition(
            id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn, domain=env.domain,
            env_id=env.env_id, task_id=task.task_id, instruction=task.instruction, action=action,
            observation=observation, reward=float(reward), done=last,
            source="synthetic" if step_info.get("simulated") else "real", policy=policy,
            env_version=env.env_version, seed=seed, timestamp=utc_now(),
            info={**info, "terminated": terminated, "max_steps_reached": bool(step_info.get("max_steps_reached"))},
        )
    except ValidationError as err:  # a policy or env bug: say which episode, turn and field
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise ValueError(f"{trajectory_id} turn {turn} ({env.domain}, {policy} policy, action {action!r}) "
                         f"is not a valid transition: {fields}") from err


class BehaviourPolicies:
    """Each episode's own behaviour policy, acting on its observation and history with its own RNG."""

    def __init__(self, policies: Sequence[Policy], observations: Sequence[str],
                 rngs: Sequence[random.Random]) -> None:
        self.policies, self.observations, self.rngs = list(policies), list(observations), list(rngs)
        self.histories: list[list[tuple[str, str]]] = [[] for _ in self.policies]

    def act(self, active: Sequence[int]) -> list[str]:
        return [self.policies[k].act(self.observations[k], self.histories[k], self.rngs[k]) for k in active]

    def observe(self, index: int, action: str, observation: str, last: bool) -> None:
        self.observations[index] = observation
        self.histories[index].append((action, observation))


def play_episodes(vector: TextVectorEnv, indices: Sequence[int], *, base_seed: int, policy_mix: PolicyMix,
                  trajectory_prefix: str, extra_info: Mapping[str, Any] | None = None,
                  drop_info: Sequence[str] = ()) -> Iterator[Transition]:
    """Play episode `indices[k]` on sub-env k of `vector`, all together, yielding each step's row
    as it completes, up to the vector's step limits. `drop_info` leaves bulky step info out of the rows."""
    if vector.num_envs != len(indices):
        raise ValueError(f"{vector.num_envs} envs but {len(indices)} episodes")
    envs = vector.envs
    seeds = [episode_seed(base_seed, i) for i in indices]
    rngs = [random.Random(f"policy:{seed}") for seed in seeds]
    names = [choose_policy(policy_mix, rng) for rng in rngs]
    observations = vector.reset(seed=seeds)[0]
    first_observations = list(observations)
    tasks = []
    for env in envs:
        if env.task is None:
            raise TypeError(f"{type(env).__name__} exposes no `task` after reset(); policies need it")
        tasks.append(env.task)
    policy = BehaviourPolicies([make_policy(env.domain, name, task) for env, name, task in zip(envs, names, tasks)],
                               observations, rngs)
    trajectory_ids = [trajectory_id_for(trajectory_prefix, base_seed, i) for i in indices]
    for step in run_episodes(vector, policy):
        k = step.index
        info = {**{key: v for key, v in step.info.items() if key not in drop_info}, **(extra_info or {}),
                "episode_index": indices[k]}
        if step.turn == 0:
            info[FIRST_OBSERVATION] = first_observations[k]
        yield transition(envs[k], tasks[k], trajectory_ids[k], step.turn, step.action, step.result, last=step.last,
                         policy=names[k], seed=seeds[k], info=info)
