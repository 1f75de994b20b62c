"""Synthetic trajectories: behaviour policies play WorldModelEnv episodes, many at a time.

Episodes run in lockstep batches of `synthesize.batch`: at each step every unfinished episode's
policy acts, and one batched generation answers them all (`step_many`). Rows have the real
collection's schema with `source: synthetic`, the simulating model and the controls in `info`,
so the same validation suites check them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from tqdm import tqdm

from agentworld.config import SynthesizeParams
from agentworld.data.collect import choose_policy, episode_seed, trajectory_id_for
from agentworld.data.schema import Transition, transition_id, utc_now
from agentworld.domains import make_policy
from agentworld.evaluation.backends import Backend
from agentworld.simulation.env import Control, RealTaskSource, WorldModelEnv, step_many


def control_of(params: SynthesizeParams) -> Control:
    c = params.control
    return Control(faults=tuple(c.faults), fault_rate=c.fault_rate, perturbation=c.perturbation, fiction=c.fiction)


def lockstep(envs: Sequence[WorldModelEnv], domain: str, params: SynthesizeParams, indices: Sequence[int],
             model_label: str) -> Iterator[Transition]:
    """Play episodes `indices` (one per env) together; yield each step's row as it completes."""
    seeds = [episode_seed(params.seed, i) for i in indices]
    rngs = [random.Random(f"policy:{seed}") for seed in seeds]
    names = [choose_policy(params.policy_mix, rng) for rng in rngs]
    observations = [env.reset(seed=seed)[0] for env, seed in zip(envs, seeds)]
    policies = [make_policy(domain, name, env.task) for name, env in zip(names, envs)]
    histories: list[list[tuple[str, str]]] = [[] for _ in envs]
    active = list(range(len(envs)))
    for turn in range(params.max_steps):
        if not active:
            return
        actions = [policies[k].act(observations[k], histories[k], rngs[k]) for k in active]
        results = step_many([envs[k] for k in active], actions)
        still = []
        for k, action, (observation, reward, terminated, truncated, info) in zip(active, actions, results):
            last = terminated or truncated or turn == params.max_steps - 1
            task = envs[k].task
            trajectory_id = trajectory_id_for(f"{domain}-synthetic", params.seed, indices[k])
            yield Transition(
                id=transition_id(trajectory_id, turn), trajectory_id=trajectory_id, turn=turn, domain=domain,
                env_id=envs[k].env_id, task_id=task.task_id, instruction=task.instruction, action=action,
                observation=observation, reward=float(reward), done=last, source="synthetic", policy=names[k],
                env_version=envs[k].env_version, seed=seeds[k], timestamp=utc_now(),
                info={**{key: v for key, v in info.items() if key != "generation"}, "world_model": model_label,
                      "episode_index": indices[k]},
            )
            observations[k] = observation
            histories[k].append((action, observation))
            if not last:
                still.append(k)
        active = still


def synthesize_domain(domain: str, backend: Backend, params: SynthesizeParams, model_label: str,
                      progress: bool = True) -> Iterator[Transition]:
    """Every synthetic episode of one domain, `params.batch` at a time."""
    control = control_of(params)
    indices = list(range(params.episodes_per_domain))
    tasks = RealTaskSource(domain)  # one real env hands out every episode's task and first observation
    bar = tqdm(total=len(indices), desc=f"synthesize {domain}", unit="ep", disable=not progress)
    try:
        for start in range(0, len(indices), params.batch):
            chunk = indices[start: start + params.batch]
            envs = [WorldModelEnv(domain, backend, tasks, control=control, retries=params.retries) for _ in chunk]
            yield from lockstep(envs, domain, params, chunk, model_label)
            bar.update(len(chunk))
    finally:
        tasks.close()
        bar.close()


def summary(rows: Sequence[Transition]) -> dict[str, Any]:
    episodes = {r.trajectory_id for r in rows}
    errors = sum(bool(r.info.get("wm_error")) for r in rows)
    return {"rows": len(rows), "episodes": len(episodes), "wm_error_rows": errors,
            "wm_error_share": errors / len(rows) if rows else 0.0}
