"""Real-environment throughput per domain: transitions per second with one and two workers.

    .venv/bin/python bench/env_throughput.py [--domains terminal os ...] [--episodes 16] [--repeats 3]

For every available domain this times `collect_parallel` (the collection path itself: worker
start, environment start, resets, behaviour policies, steps) with `workers=1` and `workers=2`
on the same episodes, `--repeats` times each (after one untimed pass that fills per-machine
caches such as generated games and the search index), and prints the median transitions/s, the ratio
2 workers / 1 worker, and the environment's start-up time (make_env + first reset, median).
These are the real-environment baselines the world-model simulator is compared against.
Results also go to reports/bench/env_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentworld.config import CollectParams, SandboxParams  # noqa: E402
from agentworld.data.collect import collect_parallel, episode_seed  # noqa: E402
from agentworld.envs.registry import list_envs, make_env  # noqa: E402


def startup_seconds(domain: str, sandbox: SandboxParams, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        env = make_env(domain, sandbox)
        env.reset(seed=episode_seed(0, 0))
        times.append(time.perf_counter() - start)
        env.close()
    return statistics.median(times)


def throughput(domain: str, params: CollectParams, sandbox: SandboxParams, repeats: int) -> tuple[float, int]:
    rates, rows = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        rows = len(collect_parallel(domain, params, sandbox, progress=False))
        rates.append(rows / (time.perf_counter() - start))
    return statistics.median(rates), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", nargs="*", help="default: every available domain")
    parser.add_argument("--episodes", type=int, default=16, help="episodes per timed run")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("reports/bench/env_throughput.json"))
    args = parser.parse_args()

    status = {env.name: env for env in list_envs()}
    domains = args.domains or [name for name, env in status.items() if env.available]
    for name, env in status.items():
        if not env.available and name in (args.domains or status):
            print(f"{name:13s} skipped: {env.reason}")
    sandbox = SandboxParams()
    results = {}
    header = f"{'domain':13s} {'startup s':>10s} {'1 worker t/s':>13s} {'2 workers t/s':>14s} {'ratio':>6s} {'rows':>5s}"
    print(header)
    for domain in domains:
        if not status[domain].available:
            continue
        base = CollectParams(domains=[domain], episodes_per_domain=args.episodes, max_steps=args.max_steps, seed=0)
        collect_parallel(domain, base.model_copy(update={"workers": 1}), sandbox, progress=False)  # warm caches
        startup = startup_seconds(domain, sandbox, args.repeats)
        one, rows = throughput(domain, base.model_copy(update={"workers": 1}), sandbox, args.repeats)
        two, _ = throughput(domain, base.model_copy(update={"workers": 2}), sandbox, args.repeats)
        results[domain] = {"startup_s": round(startup, 3), "transitions_per_s_1_worker": round(one, 2),
                           "transitions_per_s_2_workers": round(two, 2), "ratio_2_to_1": round(two / one, 2),
                           "transitions": rows, "episodes": args.episodes, "repeats": args.repeats}
        print(f"{domain:13s} {startup:10.2f} {one:13.1f} {two:14.1f} {two / one:6.2f} {rows:5d}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"(medians of {args.repeats} runs of {args.episodes} episodes, max {args.max_steps} steps; "
          f"written to {args.out})")


if __name__ == "__main__":
    main()
