"""Collect real trajectories: behaviour policies playing real environments, one row per step.

Everything is derived from (collect.seed, episode index): the episode seed picks the task and
its files, a separate stream picks the behaviour policy by the policy_mix shares and drives
the policy. So any subset of episodes can be (re)collected independently, in any order or in
parallel shards (`episode_indices`), and yields the same tasks and actions every time.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from tqdm import tqdm

from agentworld.config import CollectParams, PolicyMix, SandboxParams
from agentworld.data.schema import Transition, transition_id, utc_now
from agentworld.envs.base import TextEnv
from agentworld.envs.policies import POLICY_NAMES, make_policy
from agentworld.envs.registry import make_env

SEED_STRIDE = 1_000_003  # a prime: seeds of different collect.seed values never collide in practice


def episode_seed(base_seed: int, index: int) -> int:
    return base_seed * SEED_STRIDE + index


def trajectory_id_for(domain: str, base_seed: int, index: int) -> str:
    return f"{domain}-s{base_seed}-e{index:06d}"


def choose_policy(mix: PolicyMix, rng: random.Random) -> str:
    """Draw a policy name with probability equal to its share in the mix."""
    roll, acc = rng.random(), 0.0
    for name in POLICY_NAMES:
        acc += getattr(mix, name)
        if roll < acc:
            return name
    return max(POLICY_NAMES, key=lambda n: getattr(mix, n))  # float round-off at the top end


def collect_episodes(domain: str, collect_params: CollectParams, sandbox_params: SandboxParams,
                     episode_indices: Iterable[int] | None = None, *, progress: bool = True) -> Iterator[Transition]:
    """Play episodes `episode_indices` (default: all episodes_per_domain) and yield their steps."""
    indices = list(range(collect_params.episodes_per_domain) if episode_indices is None else episode_indices)
    env = make_env(domain, sandbox_params)
    try:
        for index in tqdm(indices, desc=f"collect {domain}", unit="ep", disable=not progress):
            yield from _play_episode(env, domain, collect_params, index)
    finally:
        env.close()


def _play_episode(env: TextEnv, domain: str, params: CollectParams, index: int) -> Iterator[Transition]:
    seed = episode_seed(params.seed, index)
    policy_rng = random.Random(f"policy:{seed}")
    policy_name = choose_policy(params.policy_mix, policy_rng)
    observation, _ = env.reset(seed=seed)
    task = getattr(env, "task", None)  # policies are built from the episode's task
    if task is None:
        raise TypeError(f"{type(env).__name__} exposes no `task` after reset(); policies need it")
    policy = make_policy(policy_name, task)
    trajectory_id = trajectory_id_for(domain, params.seed, index)
    history: list[tuple[str, str]] = []
    for turn in range(params.max_steps):
        action = policy.act(observation, history, policy_rng)
        observation, reward, terminated, truncated, info = env.step(action)
        last = terminated or truncated or turn == params.max_steps - 1
        yield Transition(
            id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn, domain=domain,
            env_id=env.env_id, task_id=task.task_id, instruction=task.instruction, action=action,
            observation=observation, reward=float(reward), done=last, source="real", policy=policy_name,
            env_version=env.env_version, seed=seed, timestamp=utc_now(),
            info={**info, "episode_index": index, "terminated": terminated,
                  "max_steps_reached": last and not (terminated or truncated)},
        )
        history.append((action, observation))
        if terminated or truncated:
            break


def play_episode(domain: str, seed: int, max_steps: int, policy_name: str,
                 sandbox_params: SandboxParams | None = None) -> Iterator[Transition]:
    """One episode with a chosen policy, for `agentworld envs play` (not part of collection)."""
    if policy_name not in POLICY_NAMES:
        raise ValueError(f"unknown policy {policy_name!r}; choose one of {', '.join(POLICY_NAMES)}")
    env = make_env(domain, sandbox_params)
    mix = PolicyMix(**{name: float(name == policy_name) for name in POLICY_NAMES})
    params = CollectParams(episodes_per_domain=1, max_steps=max_steps, policy_mix=mix, seed=0)
    try:
        yield from _play_episode(env, domain, params, index=seed)
    finally:
        env.close()
