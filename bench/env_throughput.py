"""Real-environment throughput per domain: transitions per second with one and two workers.

    .venv/bin/python bench/env_throughput.py [--domains terminal os ...] [--episodes 12] [--repeats 3]

For every available domain, each worker process builds its environment and plays one warm-up
episode (filling per-machine caches such as generated games and the search index), then all
workers start together and play `--episodes` episodes each through the collection code
(`collect_episodes`: resets, behaviour policies, steps). The figure is steady-state
transitions per second over all workers (rows / wall time from the common start to the last
finish); the start-up (make_env + first reset) is reported separately. Medians of `--repeats`
runs; the ratio 2 workers / 1 worker shows how a domain scales on this machine's cores.
These are the real-environment baselines the world-model simulator is compared against.
Results also go to reports/bench/env_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentworld.config import CollectParams, SandboxParams  # noqa: E402
from agentworld.data.collect import collect_episodes  # noqa: E402
from agentworld.domains import list_envs, make_env  # noqa: E402


def _worker(domain: str, params_json: str, offset: int, episodes: int, barrier, out) -> None:
    params = CollectParams.model_validate_json(params_json)
    sandbox = SandboxParams()
    start = time.perf_counter()
    env = make_env(domain, sandbox)
    list(collect_episodes(domain, params, sandbox, [offset + 10_000], progress=False, env=env))  # warm-up
    startup = time.perf_counter() - start
    barrier.wait()
    begin = time.time()
    rows = len(list(collect_episodes(domain, params, sandbox, range(offset, offset + episodes),
                                     progress=False, env=env)))
    out.put((rows, begin, time.time(), startup))
    env.close()


def run_once(domain: str, params: CollectParams, workers: int, episodes: int) -> tuple[float, int, float]:
    """(steady-state transitions/s over all workers, rows, median start-up s) of one timed run."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(domain, params.model_dump_json(), w * episodes, episodes, barrier, out))
             for w in range(workers)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=1800) for _ in procs]
    for proc in procs:
        proc.join()
    rows = sum(r[0] for r in results)
    wall = max(r[2] for r in results) - min(r[1] for r in results)
    return rows / wall, rows, statistics.median(r[3] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", nargs="*", help="default: every available domain")
    parser.add_argument("--episodes", type=int, default=12, help="episodes per worker per timed run")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("reports/bench/env_throughput.json"))
    args = parser.parse_args()

    status = {env.name: env for env in list_envs()}
    for name in args.domains or status:
        if name in status and not status[name].available:
            print(f"{name:13s} skipped: {status[name].reason}")
    domains = [d for d in (args.domains or status) if d in status and status[d].available]
    results = {}
    print(f"{'domain':13s} {'startup s':>10s} {'1 worker t/s':>13s} {'2 workers t/s':>14s} {'ratio':>6s}")
    for domain in domains:
        params = CollectParams(domains=[domain], episodes_per_domain=1, max_steps=args.max_steps, seed=0)
        one = [run_once(domain, params, 1, args.episodes) for _ in range(args.repeats)]
        two = [run_once(domain, params, 2, args.episodes) for _ in range(args.repeats)]
        rate1, rate2 = statistics.median(r[0] for r in one), statistics.median(r[0] for r in two)
        startup = statistics.median(r[2] for r in one)
        results[domain] = {"startup_s": round(startup, 3), "transitions_per_s_1_worker": round(rate1, 2),
                           "transitions_per_s_2_workers": round(rate2, 2), "ratio_2_to_1": round(rate2 / rate1, 2),
                           "runs_1_worker": [round(r[0], 2) for r in one], "runs_2_workers": [round(r[0], 2) for r in two],
                           "episodes_per_worker": args.episodes, "max_steps": args.max_steps}
        print(f"{domain:13s} {startup:10.2f} {rate1:13.1f} {rate2:14.1f} {rate2 / rate1:6.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"(steady state after start-up; medians of {args.repeats} runs of {args.episodes} episodes per worker, "
          f"max {args.max_steps} steps; written to {args.out})")


if __name__ == "__main__":
    main()
