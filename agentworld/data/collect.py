"""Collect real trajectories: behaviour policies playing real environments, one row per step.

Episodes run through the episode engine (`agentworld/data/episodes.py`), which derives
everything from (collect.seed, episode index). So any subset of episodes can be (re)collected
independently, in any order or in parallel shards (`episode_indices`), and yields the same
tasks and actions every time; shards make the collection resumable.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import shutil
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentworld.config import CollectParams, PolicyMix, SandboxParams
from agentworld.data.episodes import play_episodes
from agentworld.data.io import claim_directory, read_transitions, write_jsonl
from agentworld.data.schema import Transition
from agentworld.domains import make_env
from agentworld.envs.base import TextEnv
from agentworld.envs.behaviour import POLICY_NAMES
from agentworld.envs.vector import TextVectorEnv

SHARD_EPISODES = 8  # episodes per resumable unit of work


def collect_episodes(domain: str, collect_params: CollectParams, sandbox_params: SandboxParams,
                     episode_indices: Iterable[int] | None = None, *, progress: bool = True,
                     env: TextEnv | None = None) -> Iterator[Transition]:
    """Play episodes `episode_indices` (default: all of the domain's episodes) and yield their steps.

    With `env` given, the caller owns it (it is reused and not closed); else one is built here.
    """
    indices = list(range(collect_params.episodes_for(domain)) if episode_indices is None else episode_indices)
    own_env = env is None
    env = make_env(domain, sandbox_params) if env is None else env
    try:
        for index in tqdm(indices, desc=f"collect {domain}", unit="ep", disable=not progress):
            yield from _play_episode(env, domain, collect_params, index)
    finally:
        if own_env:
            env.close()


def shard_ranges(episodes: int, shard_episodes: int = SHARD_EPISODES) -> list[range]:
    """Fixed episode ranges; they do not depend on the worker count, so a resume may change it."""
    return [range(start, min(start + shard_episodes, episodes)) for start in range(0, episodes, shard_episodes)]


def collect_parallel(domain: str, collect_params: CollectParams, sandbox_params: SandboxParams,
                     *, progress: bool = True, parts_dir: Path | None = None) -> list[Transition]:
    """Collect every episode of `domain` with `collect.workers` processes, one environment per worker.

    Episodes are independent and seeded by index, so the result does not depend on the number
    of workers: rows come back sorted by episode index and turn.

    Resumable: with `parts_dir`, every finished shard (a fixed range of episodes) is written
    there atomically, and a rerun with the same settings loads finished shards instead of
    playing them again, so an interrupted collection loses at most the shards in flight and
    never duplicates an episode. Settings that change the episodes (seed, steps, policy mix,
    sandbox limits) invalidate the parts.
    """
    shards = shard_ranges(collect_params.episodes_for(domain))
    store = _ShardStore(parts_dir / domain, _fingerprint(domain, collect_params, sandbox_params)) if parts_dir else None
    done: dict[int, list[Transition]] = store.load(len(shards)) if store else {}
    todo = [k for k in range(len(shards)) if k not in done]
    total = sum(len(r) for r in shards)
    resumed = sum(len(shards[k]) for k in done)
    workers = max(1, min(collect_params.workers, len(todo)))
    desc = f"collect {domain} ({workers} worker{'s' if workers > 1 else ''})"
    with tqdm(total=total, initial=resumed, desc=desc, unit="ep", disable=not progress) as bar:
        def finished(k: int, rows: list[Transition]) -> None:
            done[k] = rows
            if store:
                store.save(k, rows)
            bar.update(len(shards[k]))

        if workers == 1:
            env = make_env(domain, sandbox_params) if todo else None
            try:
                for k in todo:
                    finished(k, list(collect_episodes(domain, collect_params, sandbox_params, shards[k],
                                                      progress=False, env=env)))
            finally:
                if env is not None:
                    env.close()
        else:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(_collect_shard, domain, collect_params, sandbox_params, list(shards[k])): k
                           for k in todo}
                for future in as_completed(futures):
                    finished(futures[future], future.result())
    rows = [row for k in sorted(done) for row in done[k]]
    rows.sort(key=lambda r: (r.info.get("episode_index", 0), r.turn))
    return rows


# One environment per worker process, reused by every shard the worker plays (a JVM, a browser
# or a server per shard would cost more than the episodes). Closed when the worker exits.
_WORKER_ENVS: dict[tuple[str, str], TextEnv] = {}


def _worker_env(domain: str, sandbox_params: SandboxParams) -> TextEnv:
    key = (domain, sandbox_params.model_dump_json())
    env = _WORKER_ENVS.get(key)
    if env is None:
        env = _WORKER_ENVS[key] = make_env(domain, sandbox_params)
        # ProcessPoolExecutor workers leave through multiprocessing's exit hook, not atexit.
        multiprocessing.util.Finalize(env, env.close, exitpriority=10)
    return env


def _collect_shard(domain: str, collect_params: CollectParams, sandbox_params: SandboxParams,
                   indices: list[int]) -> list[Transition]:
    env = _worker_env(domain, sandbox_params)
    return list(collect_episodes(domain, collect_params, sandbox_params, indices, progress=False, env=env))


def _fingerprint(domain: str, params: CollectParams, sandbox_params: SandboxParams) -> dict[str, Any]:
    """Everything that decides what an episode contains (not how many episodes there are)."""
    return {"domain": domain, "seed": params.seed, "max_steps": params.max_steps,
            "policy_mix": params.policy_mix.model_dump(), "sandbox": sandbox_params.model_dump(),
            "shard_episodes": SHARD_EPISODES}


class _ShardStore:
    """Finished shards on disk: `shard-00003.jsonl` holds episodes 3*S .. 4*S-1."""

    def __init__(self, directory: Path, fingerprint: dict[str, Any]) -> None:
        self.directory, self.fingerprint = directory, fingerprint
        claim_directory(directory, fingerprint)  # other settings: the shards there are other episodes

    def path(self, k: int) -> Path:
        return self.directory / f"shard-{k:05d}.jsonl"

    def load(self, shards: int) -> dict[int, list[Transition]]:
        return {k: read_transitions(self.path(k)) for k in range(shards) if self.path(k).exists()}

    def save(self, k: int, rows: list[Transition]) -> None:
        write_jsonl(self.path(k), rows)

    def clear(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _play_episode(env: TextEnv, domain: str, params: CollectParams, index: int) -> Iterator[Transition]:
    if env.domain != domain:
        raise ValueError(f"a {env.domain} env cannot collect {domain} episodes")
    yield from play_episodes(TextVectorEnv([env], max_episode_steps=params.max_steps), [index], base_seed=params.seed,
                             policy_mix=params.policy_mix, trajectory_prefix=domain)


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
