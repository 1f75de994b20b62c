"""Collect real trajectories: behaviour policies playing real environments, one row per step.

Everything is derived from (collect.seed, episode index): the episode seed picks the task and
its files, a separate stream picks the behaviour policy by the policy_mix shares and drives
the policy. So any subset of episodes can be (re)collected independently, in any order or in
parallel shards (`episode_indices`), and yields the same tasks and actions every time.
"""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm import tqdm

from agentworld.config import CollectParams, PolicyMix, SandboxParams
from agentworld.data.schema import Transition, transition_id, utc_now
from agentworld.envs.base import TextEnv
from agentworld.envs.behaviour import POLICY_NAMES
from agentworld.envs.registry import make_env, make_policy

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


def collect_parallel(domain: str, collect_params: CollectParams, sandbox_params: SandboxParams,
                     *, progress: bool = True) -> list[Transition]:
    """Collect every episode with `collect.workers` processes, one environment per worker.

    Episodes are independent and seeded by index, so the result does not depend on the number
    of workers: rows come back sorted by episode index and turn.
    """
    indices = list(range(collect_params.episodes_per_domain))
    workers = min(collect_params.workers, len(indices))
    if workers <= 1:
        return list(collect_episodes(domain, collect_params, sandbox_params, indices, progress=progress))
    shards = [indices[i::workers * 4] for i in range(workers * 4)]  # small shards keep workers evenly busy
    rows: list[Transition] = []
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_collect_shard, domain, collect_params, sandbox_params, shard) for shard in shards if shard]
        with tqdm(total=len(indices), desc=f"collect {domain} ({workers} workers)", unit="ep", disable=not progress) as bar:
            for future in as_completed(futures):
                shard_rows = future.result()
                rows.extend(shard_rows)
                bar.update(len({r.trajectory_id for r in shard_rows}))
    rows.sort(key=lambda r: (r.info.get("episode_index", 0), r.turn))
    return rows


def _collect_shard(domain: str, collect_params: CollectParams, sandbox_params: SandboxParams,
                   indices: list[int]) -> list[Transition]:
    return list(collect_episodes(domain, collect_params, sandbox_params, indices, progress=False))


def _play_episode(env: TextEnv, domain: str, params: CollectParams, index: int) -> Iterator[Transition]:
    seed = episode_seed(params.seed, index)
    policy_rng = random.Random(f"policy:{seed}")
    policy_name = choose_policy(params.policy_mix, policy_rng)
    observation, _ = env.reset(seed=seed)
    task = getattr(env, "task", None)  # policies are built from the episode's task
    if task is None:
        raise TypeError(f"{type(env).__name__} exposes no `task` after reset(); policies need it")
    policy = make_policy(domain, policy_name, task)
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
