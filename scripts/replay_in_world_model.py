"""Replay an agent experiment's episodes inside another world model: does it judge the same
actions as the real game did?

Reads the WM2Real rows (`seed*/<arm>/wm2real_episodes.jsonl`) of an `agentworld experiment
sim-rl` run folder on TextWorld (each row: the task's seed, the actions the agent chose inside the
simulator, the recorded verifier's claim, the real outcome of the same actions), plays the same
actions in a WorldModelEnv of the given world model, ends each episode at the first step the
`observation` verifier calls solved (as the experiment does), and prints the claim, its
agreement with the real outcome and the false-success rate per arm, next to the recorded ones.
Replaying with the experiment's own world model reproduces the recorded claims; with another
model it compares two simulators on the same actions (chosen against the first one's answers).

    python scripts/replay_in_world_model.py runs/experiments/sim_rl/<timestamp> models:/agentworld-world-model/3
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from textworld_verifiers import TEMPLATES  # the game types of the TextWorld experiment (scripts/)

from agentworld.agents.episodes import task_options
from agentworld.agents.train import resolve_world_model
from agentworld.models.backends import TransformersBackend
from agentworld.simulation.env import RealTaskSource, WorldModelEnv
from agentworld.simulation.verifiers import ObservationVerifier

ARMS = ("bc", "bc+rl_real", "bc+rl_sim")


def replayed_claim(env: WorldModelEnv, row: dict) -> bool:
    """Whether the world model's answers to the row's actions announce a won game."""
    env.reset(seed=row["seed"], options=task_options(TEMPLATES, row["seed"]))
    for action in row["actions"]:
        if ObservationVerifier.solved("textworld", action, env.step(action)[0]):
            return True
    return False


def main(run_dir: Path, world_model: str) -> None:
    model = resolve_world_model(world_model, Path(".").resolve())
    tasks = RealTaskSource("textworld")
    env = WorldModelEnv("textworld", TransformersBackend(model.path, 256, 4, 2048), tasks)
    print(f"world model {model.label}; episodes of {run_dir}")
    print("| arm | episodes | real success | recorded: claimed / agreement | replayed: claimed / agreement / false success |")
    print("|---|---|---|---|---|")
    try:
        for arm in ARMS:
            rows = [json.loads(line) for path in sorted(run_dir.glob(f"seed*/{arm}/wm2real_episodes.jsonl"))
                    for line in path.read_text().splitlines()]
            if not rows:
                continue
            real = [bool(r["real_success"]) for r in rows]
            recorded = [bool(r["sim_success"]) for r in rows]
            replayed = [replayed_claim(env, r) for r in rows]
            n = len(rows)

            def share(flags: list[bool]) -> str:
                return f"{sum(flags) / n:.3f}"

            print(f"| {arm} | {n} | {share(real)} | {share(recorded)} / {share([a == b for a, b in zip(recorded, real)])} | "
                  f"{share(replayed)} / {share([a == b for a, b in zip(replayed, real)])} / "
                  f"{share([a and not b for a, b in zip(replayed, real)])} |", flush=True)
    finally:
        tasks.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
