"""Synthetic trajectories: behaviour policies play WorldModelEnv episodes, many at a time.

Episodes run in lockstep batches of `synthesize.batch`: at each step every unfinished episode's
policy acts, and one batched generation answers them all (a `TextVectorEnv` of WorldModelEnvs),
through the same episode engine as real collection (`agentworld/data/episodes.py`). Rows have the real
collection's schema with `source: synthetic`, the simulating model and the controls in `info`,
so the same validation suites check them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tqdm import tqdm

from agentworld.config import SynthesizeParams
from agentworld.data.episodes import play_episodes
from agentworld.data.schema import Transition
from agentworld.envs.vector import TextVectorEnv
from agentworld.models.backends import Backend
from agentworld.simulation.env import Control, RealTaskSource, WorldModelEnv


def control_of(params: SynthesizeParams) -> Control:
    c = params.control
    return Control(faults=tuple(c.faults), fault_rate=c.fault_rate, perturbation=c.perturbation, fiction=c.fiction)


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
            yield from play_episodes(TextVectorEnv(envs, max_episode_steps=params.max_steps), chunk,
                                     base_seed=params.seed, policy_mix=params.policy_mix,
                                     trajectory_prefix=f"{domain}-synthetic",
                                     extra_info={"world_model": model_label},
                                     drop_info=("generation",))
            bar.update(len(chunk))
    finally:
        tasks.close()
        bar.close()


def summary(rows: Sequence[Transition]) -> dict[str, Any]:
    episodes = {r.trajectory_id for r in rows}
    errors = sum(bool(r.info.get("wm_error")) for r in rows)
    return {"rows": len(rows), "episodes": len(episodes), "wm_error_rows": errors,
            "wm_error_share": errors / len(rows) if rows else 0.0}
