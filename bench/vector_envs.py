"""Real envs behind the vector interface: in this process (stepped one after the other) next to
worker processes (`make_env(..., process=True)`, stepped in parallel).

    .venv/bin/python bench/vector_envs.py [--domains terminal os] [--envs 4] [--steps 12] [--repeats 3]

For each domain, `--envs` sub-envs are reset with fixed seeds and stepped `--steps` times with
the domain's scripted behaviour policy's first actions replayed (the same actions for both
kinds), through `TextVectorEnv`; only `step` is timed. Printed side by side: vector steps/s
(sub-env transitions per second) of each kind, medians of `--repeats`, and their ratio. This
is what agent evaluation and real-environment RL gain from worker processes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentworld.domains import list_envs, make_env, make_policy  # noqa: E402
from agentworld.envs.vector import TextVectorEnv  # noqa: E402


def scripted_actions(domain: str, seed: int, steps: int) -> list[str]:
    """The scripted policy's actions of one real episode, padded by repeating its last one."""
    env = make_env(domain)
    try:
        observation, _ = env.reset(seed=seed)
        policy, rng, history, actions = make_policy(domain, "scripted", env.task), random.Random(seed), [], []
        for _ in range(steps):
            action = policy.act(observation, history, rng)
            observation, _, terminated, truncated, _ = env.step(action)
            history.append((action, observation))
            actions.append(action)
            if terminated or truncated:
                break
    finally:
        env.close()
    # Repeating an inspection-like last action keeps the episode going; an end action is dropped.
    actions = [a for a in actions if a.strip() not in ("submit", "exit", "stop", "logout")] or ["ls"]
    return (actions * steps)[:steps]


def steps_per_second(domain: str, process: bool, n: int, actions: list[list[str]]) -> float:
    vector = TextVectorEnv([make_env(domain, process=process) for _ in range(n)])
    try:
        vector.reset(seed=[100 + k for k in range(n)])
        elapsed, done = 0.0, 0
        for turn in range(len(actions[0])):
            if not vector.running.any():
                break
            started = time.perf_counter()
            vector.step([a[turn] for a in actions])
            elapsed += time.perf_counter() - started
            done += int(vector.running.sum()) or n
        return done / elapsed
    finally:
        vector.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", nargs="+", default=["terminal", "os"])
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    available = {env.name for env in list_envs() if env.available}
    print("| domain | sub-envs | in-process steps/s | worker processes steps/s | ratio |")
    print("|---|---:|---:|---:|---:|")
    for domain in args.domains:
        if domain not in available:
            print(f"| {domain} | unavailable here | | | |")
            continue
        actions = [scripted_actions(domain, 100 + k, args.steps) for k in range(args.envs)]
        local, workers = [], []
        for _ in range(args.repeats):  # alternate the kinds, so background load hits both
            local.append(steps_per_second(domain, False, args.envs, actions))
            workers.append(steps_per_second(domain, True, args.envs, actions))
        a, b = statistics.median(local), statistics.median(workers)
        print(f"| {domain} | {args.envs} | {a:.1f} | {b:.1f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
